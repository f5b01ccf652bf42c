"""The machine probe's defaults, apart from the probe itself, so that the CLI can name them
in its help without importing the probe (and psutil, numpy, gguf under it) on every start."""

# Weight types the probe measures where this llama.cpp build and the writer support them, in
# the order measured (a busy machine's budget runs out at the end). Q5_0: the fallback of
# Q4_K_M files for rows not a multiple of 256 wide (most of Gemma 3 270M's and 1B's blocks);
# its prompt kernel is Q8_0's tinyBLAS template plus unpacking the fifth bit, which cost
# x1.19-1.42 of Q8_0 per weight on a Zen 5 EPYC VM (bench/probe_width.py), so Q8_0 cannot
# stand in for it.
ALL_TYPES = ("F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q5_0", "IQ4_XS", "MXFP4", "NVFP4")
BUDGET_S = 30.0  # the whole probe, generation of its models included (issue 14)
# Others may use this share of the machine's total CPU time during a measurement (10% is a
# fifth of one core on two: a desktop's idle background, not a compile or a second model).
DEFAULT_BUSY_THRESHOLD = 0.10
