"""How to run the Rodinia programs on a GPU machine: arguments for those that generate their own input (sizes
chosen to take about a second on an H100 / H200), and the data each of the others reads that a fetched
checkout's sources lack. Keyed by the main file's path inside the suite's cuda/ directory."""

#: main file -> command-line arguments (the program makes its input from them).
RUN_ARGS = {
    "gaussian/gaussian.cu": ["-s", "1024"],
    "lud/cuda/lud.cu": ["-s", "2048", "-v"],
    "nw/needle.cu": ["8192", "10"],
    "pathfinder/pathfinder.cu": ["100000", "1000", "20"],
    "srad/srad_v2/srad.cu": ["2048", "2048", "0", "127", "0", "127", "0.5", "10"],
    "backprop/backprop_cuda.cu": ["1048576"],
    "lavaMD/kernel/kernel_gpu_cuda_wrapper.cu": ["-boxes1d", "20"],
    "particlefilter/ex_particle_CUDA_naive_seq.cu": ["-x", "128", "-y", "128", "-z", "10", "-np", "10000"],
    "particlefilter/ex_particle_CUDA_float_seq.cu": ["-x", "128", "-y", "128", "-z", "10", "-np", "10000"],
    "streamcluster/streamcluster_cuda.cu": ["10", "20", "256", "65536", "65536", "1000", "none", "output.txt", "1"],
    "hybridsort/main.cu": ["r"],
}

#: main file -> its own timer: an extended regex (grep -E) whose first number is a time the program prints
#: (the unit does not matter: x naive is a ratio of the same line); the matches of a run are summed. The
#: others are timed by their wall time (nw's and pathfinder's "Exec:" lines need -DTIMING, which their
#: Makefiles give clang only). Kernel time where the program prints it: start-up does not hide the kernels.
TIMERS = {
    "gaussian/gaussian.cu": r"Time for CUDA kernels:[[:space:]]*[0-9.eE+-]+",
    "lud/cuda/lud.cu": r"Time consumed\(ms\): *[0-9.eE+-]+",
    "particlefilter/ex_particle_CUDA_float_seq.cu": r"GPU Execution: *[0-9.eE+-]+",
    "srad/srad_v1/main.cu": r"[0-9.]+ s, +[0-9.]+ % : (EXTRACT IMAGE|COMPUTE|COMPRESS IMAGE)",
    "cfd/euler3d.cu": r"[0-9.eE+-]+ seconds per iteration",
    "cfd/euler3d_double.cu": r"[0-9.eE+-]+ seconds per iteration",
    "cfd/pre_euler3d.cu": r"[0-9.eE+-]+ seconds per iteration",
    "cfd/pre_euler3d_double.cu": r"[0-9.eE+-]+ seconds per iteration",
}

#: Output a program prints that differs between two runs of the same build (a time-seeded generator):
#: such a program's check compares nothing but the exit status.
NONDETERMINISTIC = {
    "particlefilter/ex_particle_CUDA_naive_seq.cu": "seeds its generator with the time",
    "particlefilter/ex_particle_CUDA_float_seq.cu": "seeds its generator with the time",
    "hybridsort/main.cu": "random input each run",
}

#: main file -> the data it reads (in the suite's data/ directory, not part of the sources), for the programs
#: whose input corpus_kit/rodinia_data.py does not generate.
NEEDS_DATA = {
    "hotspot/hotspot.cu": "data/hotspot/temp_512, power_512",
    "bfs/bfs.cu": "data/bfs/graph1MW_6.txt",
    "kmeans/kmeans_cuda.cu": "data/kmeans/kdd_cup",
    "b+tree/kernel/kernel_gpu_cuda_wrapper.cu": "data/b+tree/mil.txt, command.txt",
    "heartwall/main.cu": "data/heartwall/test.avi",
    "leukocyte/CUDA/find_ellipse_kernel.cu": "data/leukocyte/testfile.avi",
    "myocyte/main.cu": "data/myocyte/params",
    "mummergpu/mummergpu.cu": "data/mummergpu/*.fa",
    "dwt2d/main.cu": "data/dwt2d/rgb.bmp",
    "huffman/main_test_cu.cu": "data/huffman/test1024_H2.206587175259.in",
}
