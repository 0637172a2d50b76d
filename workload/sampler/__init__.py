"""The sampler server: ``python -m distgnn_workload.sampler`` (server-client mode).

A sampler holds its partitions (features on its GPU or in host memory, the topology
replicated or partitioned) and serves sampled, feature-complete mini-batches to trainers
over torch RPC until the trainers finish.
"""
