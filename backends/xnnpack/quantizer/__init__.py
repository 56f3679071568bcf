"""XNNPACK's pt2e quantizer: which operator patterns get int8 quantize/dequantize pairs, and how."""
