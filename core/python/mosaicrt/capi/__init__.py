"""Where onnxruntime code imports binding-level names from (``onnxruntime.capi``)."""
