"""`.ptd` files: tensor data kept beside a `.pte` (the flat-tensor format)."""
