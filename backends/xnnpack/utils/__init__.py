"""Helpers of the XNNPACK backend: compile configs and graph queries shared by partitioner and preprocess."""
