"""distgnn's API: the DistGNNJob spec models and the operator-workload contract.

Torch-free and Kubernetes-client-free, so that both the operator and the workload import it.
"""
