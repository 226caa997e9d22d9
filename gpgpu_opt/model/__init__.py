"""The offline performance model: ranks variants of a kernel without a GPU.

- `resources(source, target)`: registers, static shared memory and spills from ptxas (None without nvcc);
- `occupancy(target, threads, registers, shared)`: the CUDA occupancy calculator;
- `predict(kernel, target, sizes, resources, global_space)`: the latency-hiding model of seeds/003;
  `predict_result(result, ...)` the same for a compiled kernel, with its naive launch;
- `spearman(xs, ys)`: how well predicted times rank measured ones;
- `python -m gpgpu_opt.model.rank FILE ...`: predicted times of a list of variants (and the correlation
  with measured ones).
"""
from gpgpu_opt.model.occupancy import Occupancy, occupancy
from gpgpu_opt.model.predict import Prediction, predict, predict_result
from gpgpu_opt.model.resources import Resources, estimate_resources, resources
from gpgpu_opt.model.stats import spearman

__all__ = ["Occupancy", "occupancy", "Prediction", "predict", "predict_result", "Resources", "estimate_resources",
           "resources", "spearman"]
