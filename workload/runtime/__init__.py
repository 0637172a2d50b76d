"""The distributed runtime shared by the sampler and trainer entry points.

- ``rendezvous``: peers find each other by the contract's addresses (DNS retry, backoff,
  a timeout that names the missing peer) around one TCPStore hosted by trainer 0.
- ``rpc`` / ``ddp``: torch RPC (TensorPipe, CUDA tensors where every peer has a GPU) and
  the trainers' DDP process group on that store; the job's orderly shutdown.
- ``holder``: what a partition holder (a sampler, or a trainer in worker mode) loads and
  serves; ``features``: its feature table, remote features and the hot cache;
  ``distributed_sampler``: sampling on a replicated topology, or hop by hop over RPC.
- ``shared_slots``: bulk data between processes of one host (mini-batches, remote feature
  rows) through buffers both map (CUDA IPC, /dev/shm); RPC carries requests and sizes.
- ``batches``: the trainer's mini-batch pipelines (local sampling, or sampler servers).
- ``seeds``: how training and evaluation seeds are split across trainer ranks.
- ``checkpoint``: atomic checkpoints on the volume and resume.
- ``status_server``: Prometheus ``/metrics`` and the trainer's ``/progress`` on one port.
- ``lifecycle``: completion (result.json), the job config, and exit codes.
"""
