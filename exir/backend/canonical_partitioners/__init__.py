"""Upstream's ready-made partitioners and partition helpers (`all_node_partitioner`, `pattern_op_partitioner`)."""
