"""Delegation: partitioners tag nodes, backends preprocess them into payloads the runtime hands back."""

from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

__all__ = ["DelegationSpec", "Partitioner", "PartitionResult"]
