"""A device backend in the manner of Torch-TensorRT, for tests: engine op, partitioner, preprocess, runtimes."""
