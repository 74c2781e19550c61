"""The measurement kit users run on their GPUs: ``python -m simengine.measure
gemm|grouped-gemm|attention|memory [--for-scenario FILE] --out FILE`` and ``… nccl --for-scenario
FILE --nccl-tests-dir DIR``. Timing backends (numpy on CPU, PyTorch on GPU) in :mod:`.backends`,
the scenario's shapes in :mod:`.shapes`, the sweep and its CSV in :mod:`.sweeps`, nccl-tests
command lines in :mod:`.nccl`. How to run it on a cluster: ``simengine/measure/README.md``.
"""
