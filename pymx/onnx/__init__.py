"""ONNX export (MXNet 2.x's `mx.onnx`): `export_model` writes a model that
`HybridBlock.export` saved as an ONNX file, which onnxruntime, TensorRT and others run.

    net.hybridize(); net(x)                      # trace once
    net.export('model')                          # model-symbol.json, model-0000.params
    pymx.onnx.export_model('model-symbol.json', 'model-0000.params', in_shapes=[x.shape],
                           onnx_file_path='model.onnx')

The `onnx` package is needed (`pip install 'pymx[onnx]'`); it is imported at the first export.
`get_operator_support()` lists the MXNet operators translated.

Deliberate differences from MXNet's exporter:

* `opset_version` chooses the opset (13, the default, up to the installed onnx's newest);
  MXNet always writes the installed onnx's newest, which runtimes often do not run yet.
* The symbol is a file, its JSON, its parsed document or a SymbolGraph (pymx has no Symbol
  class); pymx's own graph format (written when a graph holds a fused convolution or a view) is
  accepted too.
* The file is written atomically; with `large_model=True` the weights go to
  `<onnx_file_path>.data` (one file, initializers of 1 KiB or more).
* The model is checked with onnx.checker before it is written (not with large_model).
* Dropout is exported as Identity whatever its mode: an exported model runs inference.
* `model_specific_logics` and `cheat_sheet` (MXNet's hooks for particular NLP models) are
  not provided.
* A parameter missing from `params` is reported through the in_shapes count (it would be an
  input), with the names of all unbound variables.

Limits: a model exported with `dynamic=True` keeps the sizes the traced graph fixed. pymx
records `x.reshape(x.shape[0], -1)` with the traced batch size, so write such reshapes with -1
or 0 codes (or use nn.Flatten) for axes meant to stay dynamic; sizes the translation derives from
`in_shapes` (MXNet's reshape codes -2/-3/-4, split sizes) are fixed too. The translations are
type-generic: float32 and float16 models export (give `in_types` to match the parameters).
"""
from ._export_model import export_model, get_operator_support

__all__ = ['export_model', 'get_operator_support']
