"""The distributed runtime shared by the sampler and trainer entry points.

- ``rendezvous``: peers find each other by the contract's addresses (DNS retry, backoff,
  a timeout that names the missing peer) around one TCPStore hosted by trainer 0.
- ``rpc`` / ``ddp``: torch RPC (TensorPipe) and DDP process groups on that store.
- ``checkpoint``: atomic checkpoints on the volume and resume.
- ``status_server``: Prometheus ``/metrics`` and the trainer's ``/progress`` on one port.
- ``features``: node features of a holder plus remote features over RPC with a hot cache.
- ``seeds``: how training and evaluation seeds are split across trainer ranks.
- ``lifecycle``: completion (result.json) and exit codes of the entry points.
"""
