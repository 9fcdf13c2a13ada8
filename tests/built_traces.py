"""Minimal traces, built with tests/trace_builder.py, of the problems no real trace in tests/data
shows (`.item()` in the middle of a step, a boolean index, a loss logged beside GradScaler's read, a step timed with CUDA events, data loading, a mask a model rebuilds, CUDA graph
launches): the finding rules' tests and the Spark tests load them as built_<name>."""

import trace_builder as tb
from conftest import TEST_DATA, read_trace

GRAPH_REPLAY = TEST_DATA / "foreign" / "rtx5080_cuda_graph_replay_manual_capture.json.gz"
LOADING = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def read_in_step(n, ops, *, waits_in="sync", nbytes=8, host="Pinned", add_us=150):
    """Step `n` (1000 µs apart) of a loop whose CPU reads a value between two kernels: a kernel, the
    read under `ops` ((name, µs after the step's start, µs), outermost first), a device-to-host copy
    of `nbytes` whose wait is in its copy call or in the stream sync after it (`waits_in`), and a
    kernel of `add_us` launched after the read."""
    t, c = n * 1000, n * 10
    copy_us, copy_dur, sync_at, sync_us = (188, 3, 240, 3) if waits_in == "copy" else (5, 2, 57, 180)
    return ([tb.step(n, t, 900),
             tb.op("aten::mul", t + 10, 20), tb.launch(t + 15, c + 1), tb.kernel("mul_kernel", t + 30, 200, c + 1)]
            + [tb.op(name, t + at, dur) for name, at, dur in ops]
            + [tb.launch(t + 50, c + 2, name="cudaMemcpyAsync", dur=copy_us),
               tb.memcpy(t + 232, copy_dur, c + 2, kind="DtoH", nbytes=nbytes, host=host),
               tb.launch(t + sync_at, c + 3, name="cudaStreamSynchronize", dur=sync_us),
               tb.op("aten::add", t + 300, 20), tb.launch(t + 305, c + 4), tb.kernel("add_kernel", t + 330, add_us, c + 4)])


def _item_loop():
    """Each step: a kernel, then `.item()` (a 4-byte copy to pageable memory and a stream sync) and
    more work after it: the CPU waits for the kernel before it can launch the next one."""
    return tb.trace([event for n in range(4) for event in read_in_step(
        n, [("aten::item", 40, 210), ("aten::_local_scalar_dense", 45, 200)],
        waits_in="copy", nbytes=4, host="Pageable", add_us=300)])


def _bool_index_loop():
    """Each step: a boolean index (out[mask]) in the forward, aten::index sizing its result with
    aten::nonzero (an 8-byte count copied to the host, a stream sync), and its backward's
    index_put_ on autograd's thread doing the same: one fix (the mask multiplied in) removes both."""
    events = []
    for n in range(4):
        t, c = n * 1000, n * 10
        events += read_in_step(n, [("aten::index", 40, 215), ("aten::nonzero", 45, 205)])
        events += [tb.op("autograd::engine::evaluate_function: IndexBackward0", t + 400, 260, tid=2),
                   tb.op("IndexBackward0", t + 402, 255, tid=2), tb.op("aten::index_put_", t + 405, 250, tid=2),
                   tb.op("aten::_index_put_impl_", t + 407, 245, tid=2), tb.op("aten::nonzero", t + 410, 150, tid=2),
                   tb.launch(t + 415, c + 5, name="cudaMemcpyAsync", dur=5, tid=2),
                   tb.memcpy(t + 485, 2, c + 5, kind="DtoH", nbytes=8, host="Pinned"),
                   tb.launch(t + 422, c + 6, name="cudaStreamSynchronize", dur=68, tid=2),
                   tb.launch(t + 600, c + 7, tid=2), tb.kernel("index_put_kernel", t + 610, 100, c + 7)]
    return tb.trace(events)


def amp_step_start(n):
    """The start of step `n` (1000 µs apart) of AMP's fp16 recipe: the backward's kernel, then
    GradScaler unscaling the gradients (aten::_amp_foreach_non_finite_check_and_unscale_)."""
    t, c = n * 1000, n * 10
    return [tb.step(n, t, 900),
            tb.op("aten::mm", t + 10, 20), tb.launch(t + 15, c + 1), tb.kernel("mm_kernel", t + 30, 250, c + 1),
            tb.op("aten::_amp_foreach_non_finite_check_and_unscale_", t + 40, 10),
            tb.launch(t + 42, c + 2), tb.kernel("unscale_kernel", t + 285, 5, c + 2)]


def _amp_loss_logged():
    """AMP's fp16 recipe with the loss logged between scaler.unscale_() and scaler.step(): each step
    unscales the gradients, reads loss.item() (the user's), then GradScaler reads found_inf right
    before the optimizer's step (its own); each read a 4-byte copy and a stream sync."""
    events = []
    for n in range(4):
        t, c = n * 1000, n * 10
        events += amp_step_start(n)
        for k, (at, who) in enumerate(((t + 60, "loss"), (t + 320, "found_inf"))):
            events += [tb.op("aten::item", at, 30 if who == "found_inf" else 240),
                       tb.op("aten::_local_scalar_dense", at + 2, 25 if who == "found_inf" else 235),
                       tb.launch(at + 4, c + 3 + 2 * k, name="cudaMemcpyAsync", dur=4),
                       tb.memcpy(at + (6 if who == "found_inf" else 232), 2, c + 3 + 2 * k, kind="DtoH", nbytes=4),
                       tb.launch(at + 10, c + 4 + 2 * k, name="cudaStreamSynchronize", dur=15 if who == "found_inf" else 225)]
        events += [tb.annotation("Optimizer.step#AdamW.step", t + 360, 300),
                   tb.op("aten::_foreach_add_", t + 370, 20), tb.launch(t + 375, c + 8),
                   tb.kernel("multi_tensor_apply_kernel", t + 390, 200, c + 8)]
    return tb.trace(events)


def _event_timed_loop():
    """Each step times its first half with CUDA events: end.synchronize() (cudaEventSynchronize,
    no op open) waits for the kernel before the CPU launches the second half."""
    events = []
    for n in range(4):
        t, c = n * 1000, n * 10
        events += [tb.step(n, t, 900),
                   tb.op("aten::mul", t + 10, 20), tb.launch(t + 15, c + 1), tb.kernel("mul_kernel", t + 30, 200, c + 1),
                   tb.launch(t + 40, c + 2, name="cudaEventRecord", dur=3),
                   tb.launch(t + 45, c + 3, name="cudaEventSynchronize", dur=186),
                   tb.op("aten::add", t + 300, 20), tb.launch(t + 305, c + 4), tb.kernel("add_kernel", t + 330, 300, c + 4)]
    return tb.trace(events)


def _loading_loop():
    """Each step loads its batch on the CPU (800 us) after the GPU has finished the last one."""
    events = []
    for n in range(4):
        t, c = n * 2000, n * 10
        events += [tb.step(n, t, 1990), tb.annotation(LOADING, t + 10, 800),
                   tb.op("aten::to", t + 820, 30), tb.launch(t + 825, c + 1, name="cudaMemcpyAsync", dur=10),
                   tb.memcpy(t + 840, 50, c + 1, kind="HtoD", nbytes=1 << 20),
                   tb.op("aten::linear", t + 860, 40), tb.launch(t + 870, c + 2), tb.kernel("gemm", t + 900, 1000, c + 2)]
    return tb.trace(events)


def _pageable_readback():
    """Each step reads a 64 MiB result back to pageable memory."""
    events = []
    for n in range(3):
        t, c = n * 10_000, n * 10
        events += [tb.step(n, t, 9000), tb.op("aten::relu", t + 10, 20), tb.launch(t + 15, c + 1),
                   tb.kernel("relu_kernel", t + 40, 1000, c + 1),
                   tb.op("aten::to", t + 100, 6000), tb.op("aten::_to_copy", t + 105, 5990),
                   tb.op("aten::copy_", t + 110, 5980), tb.launch(t + 120, c + 2, name="cudaMemcpyAsync", dur=5900),
                   tb.memcpy(t + 1050, 4900, c + 2, kind="DtoH", nbytes=64 << 20, host="Pageable")]
    return tb.trace(events)


def _mask_loop(rebuilt_in):
    """A forward that builds a causal mask from aten::ones and aten::tril in the steps `rebuilt_in`
    (a cache that keeps it elsewhere), then applies it."""
    events = []
    for n in range(4):
        t, c = n * 1000, n * 10
        events += [tb.step(n, t, 900)]
        if n in rebuilt_in:
            events += [tb.op("aten::ones", t + 10, 30), tb.op("aten::fill_", t + 15, 20), tb.launch(t + 20, c + 1),
                       tb.kernel("fill_kernel", t + 40, 4, c + 1),
                       tb.op("aten::tril", t + 50, 30), tb.launch(t + 55, c + 2), tb.kernel("tril_kernel", t + 70, 12, c + 2)]
        events += [tb.op("aten::masked_fill", t + 100, 30), tb.launch(t + 105, c + 3),
                   tb.kernel("masked_fill_kernel", t + 120, 200, c + 3)]
    return tb.trace(events)


def _graph_loop(launch_name):
    """Each step replays a graph whose kernels the profiler did not record, then runs one kernel."""
    events = []
    for n in range(4):
        t, c = n * 1000, n * 10
        events += [tb.step(n, t, 900), tb.annotation("## graph.replay ##", t + 10, 100),
                   tb.launch(t + 20, c + 1, name=launch_name, dur=30),
                   tb.op("aten::add", t + 200, 20), tb.launch(t + 205, c + 2), tb.kernel("add_kernel", t + 230, 50, c + 2)]
    return tb.trace(events)


def _graph_replay_without_graph_kernels():
    """The public RTX 5080 graph-replay trace with the GPU ops of its cudaGraphLaunch calls taken out,
    as a profiler that does not record graph kernels writes it."""
    content = read_trace(GRAPH_REPLAY)
    graphs = {e["args"]["correlation"] for e in content["traceEvents"]
              if e.get("name") == "cudaGraphLaunch" and "correlation" in e.get("args", {})}
    content["traceEvents"] = [e for e in content["traceEvents"]
                              if not (e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "ac2g")
                                      and (e.get("args", {}).get("correlation") in graphs or e.get("id") in graphs))]
    return content


BUILT = {"item_loop": _item_loop, "bool_index_loop": _bool_index_loop, "amp_loss_logged": _amp_loss_logged,
         "event_timed_loop": _event_timed_loop, "loading_loop": _loading_loop, "pageable_readback": _pageable_readback,
         "mask_every_step": lambda: _mask_loop({0, 1, 2, 3}), "mask_cached": lambda: _mask_loop({0, 2}),
         "cuda_graph_loop": lambda: _graph_loop("cudaGraphLaunch"), "hip_graph_loop": lambda: _graph_loop("hipGraphLaunch"),
         "rtx5080_graph_kernels_left_out": _graph_replay_without_graph_kernels}
