"""vendor_npu: a vendor-style delegate (partitioner, preprocess, Python and C++ runtimes)."""
