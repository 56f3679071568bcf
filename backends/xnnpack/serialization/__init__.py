"""The XNNPACK payload format: schema.fbs, its dataclasses and the payload serializer."""
