"""TensorFlow's functions under the names families/maths.NUMPY gives NumPy's, for SGD's loss:
a family's maths is written once, and maths.namespace hands it these where its arguments are
tensors (the array-API pattern scikit-learn follows). Imported only by a run that trains
(SGD's model), which registers them with the families' maths here."""

import sys

import tensorflow as tf

from hvd_linreg.families import maths

abs = tf.abs  # noqa: A001 (NumPy's name)
clip = tf.clip_by_value
concat = tf.concat
erfc = tf.math.erfc
exp = tf.exp
expm1 = tf.math.expm1
log = tf.math.log
log1p = tf.math.log1p
logsumexp = tf.reduce_logsumexp
maximum = tf.maximum
power = tf.pow
sigmoid = tf.sigmoid
sum = tf.reduce_sum  # noqa: A001
xlogy = tf.math.xlogy
zeros_like = tf.zeros_like


def take_class(values, y):
    """values[i, y[i]] per row (y: a class's number)."""
    return tf.gather(values, tf.cast(y, tf.int32), axis=1, batch_dims=1)


maths.NAMESPACES["tensorflow"] = sys.modules[__name__]
