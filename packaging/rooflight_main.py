"""Entry point of the frozen app: the same `main` as the `rooflight` console script."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--noalloc-worker"]:
        # the child process of `estimate --confirm` (runtime/confirm.py: worker_command)
        from rooflight.runtime.noalloc_worker import main as worker_main

        worker_main()
    if sys.argv[1:2] == ["--amx-check"]:
        # the child that tries llama.cpp's AMX kernels once per build (runtime/amx.py)
        from rooflight.runtime.amx import main as amx_main

        amx_main()
    from rooflight.cli import main

    sys.exit(main())
