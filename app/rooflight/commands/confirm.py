"""`estimate --confirm`: llama.cpp's own no-alloc numbers beside the plan (runtime/confirm.py)."""

from __future__ import annotations


def confirmation_for(args, est, hardware) -> tuple[dict, str]:
    """The `confirmed` JSON object and its sentence for the plan `est` of args.model."""
    from rooflight.runtime.confirm import confirm, describe, unavailable

    if getattr(args, "hardware", None):
        c = unavailable("the plan is for a --hardware profile; llama.cpp can only confirm a plan "
                        "for this machine and its own build")
    else:
        c = confirm(args.model, est, hardware)
    return c.to_dict(), describe(c)
