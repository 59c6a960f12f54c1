"""Data-parallel SGD with Horovod: the TensorFlow model every family shares (model.py, whose
loss the families write once in tf_maths.py's TensorFlow functions), the training loop
(trainer.py) with its optimizer (optimizer.py), the watchdog's progress marks (monitor.py) and
checkpoints (checkpoint.py). The only package that imports TensorFlow for a model."""
