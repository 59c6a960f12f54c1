"""The model file: what a run writes (export.py: the coefficients, their statistics and the
columns' encoding, with a TensorFlow SavedModel beside them) and what `hvd-linreg predict` and
`evaluate` read back (predict.py, predictions.py; multinomial_model.py for a model of
classes)."""
