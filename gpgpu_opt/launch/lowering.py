"""Writing launches: the `k_block`/`k_grid` helpers of a rewritten kernel and the new `<<<grid, block>>>` at
its launch sites. Reading the launch sites (the facts these start from) is launch.py's."""
from __future__ import annotations

from gpgpu_opt.analysis.z_axis import uses_grid_z
from gpgpu_opt.frontend.scanner import LaunchSite
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.launch.sites import naive_launch_name
from gpgpu_opt.launch.contract import LaunchAssumptions, helper_message
from gpgpu_opt.templating import render


def launch_helper(kernel: Kernel, assumptions: LaunchAssumptions | None = None) -> str:
    """The `k_block`/`k_grid` helpers; with `assumptions` (a kernel the file does not launch) they first check
    the naive launch they are given against them (gpgpu_opt/launch_contract.py)."""
    config: LaunchConfig = kernel.launch
    gx, gy = config.grid_expressions()
    per = config.outputs_per_block
    outputs, threads = per[0] * per[1], config.block[0] * config.block[1]
    summary = "one thread per output" if outputs == threads else \
        f"{outputs // threads} outputs per thread" if outputs > threads else f"{threads // outputs} threads per output"
    requirements = assumptions.requirements() if assumptions is not None else []
    # blockIdx.z: the naive grid's planes, one block each; a kernel that marches z: its z threads over the steps;
    # a z loop split over the grid's z: its number of blocks
    grid_z = str(config.z_blocks) if config.z_blocks else \
        f"(naive_grid.z * naive_block.z + {config.z_steps - 1}) / {config.z_steps}" if config.z_steps \
        else "naive_grid.z" if uses_grid_z(kernel.body) else None
    return render("launch_helper.cu.j2", name=kernel.name, block=config.block, outputs=per, grid=(gx, gy),
                  grid_z=grid_z,
                  summary=summary, requirements=[r.condition for r in requirements],
                  axes=[a for a in "xy" if any(r.axis == a for r in requirements if r.kind != "block")],
                  message=helper_message(assumptions) if requirements else "",
                  gains_from=kernel.size_dispatch if kernel.launch is not None else None,
                  shared_bytes=config.dynamic_shared_bytes if config.dynamic_shared_bytes > 48 * 1024 else 0,
                  naive=naive_launch_name(kernel))


def rewrite_launch(site: LaunchSite, kernel: Kernel | None = None) -> str:
    """The new `<<<...>>>` for a launch site of a rewritten kernel; the shared-memory size and stream stay,
    unless the kernel takes dynamic shared memory of its own (`kernel`: the optimized one)."""
    grid, block, *rest = site.config
    new = [f"{site.kernel}_grid({grid}, {block})", f"{site.kernel}_block({grid}, {block})", *rest]
    shared = kernel.launch.dynamic_shared_bytes if kernel is not None and kernel.launch is not None else 0
    if shared:
        name = kernel.instance.spelled if kernel.instance is not None else site.kernel
        size = f"{site.kernel}_shared_bytes((const void *){name})" if shared > 48 * 1024 else str(shared)
        new[2:3] = [size]
    return "<<<" + ", ".join(new) + ">>>"


__all__ = ["launch_helper", "rewrite_launch"]
