"""What XNNPACK takes from a program: the per-op configs and the partitioner that applies them."""
