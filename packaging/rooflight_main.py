"""Entry point of the frozen app: the same `main` as the `rooflight` console script."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--noalloc-worker"]:
        # the child process of `estimate --confirm` (runtime/confirm.py: worker_command)
        from rooflight.runtime.noalloc_worker import main as worker_main

        worker_main()
    from rooflight.cli import main

    sys.exit(main())
