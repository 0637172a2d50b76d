"""The fixed container ports of the workload's pods: the job spec must not reuse them."""

from __future__ import annotations

RPC_PORT = 29500  # sampler/trainer torch RPC (TensorPipe) listener
DDP_PORT = 29400  # trainer 0's torch.distributed TCPStore
RESERVED_PORTS = (RPC_PORT, DDP_PORT)  # ports spec.metricsPort may not take
