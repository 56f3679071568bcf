"""Edge programs to JSON and back, in the layout ExecuTorch's ETRecord stores them."""
