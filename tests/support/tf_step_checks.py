"""Run in TensorFlow's venv by tests/bench/local/test_tf_replicas.py: the TensorFlow trainer's own step
(workloads.train.tensorflow.step) on a small model, in the process shapes of the cluster (several replicas in one
worker: ``--devices N``, logical CPU devices; several workers: TF_CONFIG). Prints one JSON line.

``--check overflow`` (default): a few amp-fp16 steps where one replica's gradients overflow float16 at one step and
the others' do not (``--overflow-worker W --overflow-replica R``); prints the loss scale and skipped steps after each
step, whether every weight is finite, and a checksum of the weights (equal on every worker that stayed in step).

Replica R of worker W gets inputs of 3000 (and a label the model does not predict) at step 2: its activations fit
float16, but its weight gradients at the initial loss scale (2**15) do not (3000 x 2**15 is far past float16's
65504), while the other replicas' inputs of 1 stay far inside.
``--keras-loss-scale`` uses keras.mixed_precision.LossScaleOptimizer instead, as the trainer once did.

``--check l2``: two fp32 steps of a layer whose gradient is zero, with weight decay 0.1 and momentum 0.9; prints
the weights before and after, to compare with PyTorch SGD's coupled L2 (each step: v = 0.9 v + wd w, w -= lr v).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from workloads.train.common.files import own_tempdir  # noqa: E402
from workloads.train.tensorflow.step import LossScale, build_optimizer, build_train_step  # noqa: E402
from workloads.train.tensorflow.trainer import make_strategy, task  # noqa: E402

BATCH, FEATURES, CLASSES, STEPS, OVERFLOW_STEP = 4, 8, 3, 4, 2


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--overflow-worker", type=int, default=0)
    p.add_argument("--overflow-replica", type=int, default=0)
    p.add_argument("--keras-loss-scale", action="store_true")
    p.add_argument("--check", choices=("overflow", "l2"), default="overflow")
    a = p.parse_args()
    os.environ["EKSBENCH_CPU_DEVICES"] = str(a.devices)
    worker, _ = task(dict(os.environ))
    strategy = make_strategy(tf, [], os.environ)
    if a.check == "l2":
        return check_l2(strategy)
    keras.mixed_precision.set_global_policy("mixed_float16")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input((FEATURES,))
        hidden = keras.layers.Dense(16, activation="relu")(inputs)
        model = keras.Model(inputs, keras.layers.Dense(CLASSES, dtype="float32")(hidden))
    replicas = strategy.num_replicas_in_sync
    local = replicas // max(1, task(dict(os.environ))[1])

    def dataset_fn(ctx):
        def gen():
            for step in range(1, STEPS + 1):
                for r in range(local):
                    big = step == OVERFLOW_STEP and worker == a.overflow_worker and r == a.overflow_replica
                    yield (np.full((BATCH, FEATURES), 3000.0 if big else 1.0, "float32"),
                           np.full(BATCH, 1 if big else 0, "int32"))
        return tf.data.Dataset.from_generator(gen, output_signature=(
            tf.TensorSpec((BATCH, FEATURES), tf.float32), tf.TensorSpec((BATCH,), tf.int32)))
    batches = iter(strategy.distribute_datasets_from_function(dataset_fn))
    if a.keras_loss_scale:
        train_step, read_scale = keras_step(strategy, model, replicas)
    else:
        optimizer = build_optimizer(keras, strategy, model, 0.01)
        scale = LossScale(tf, strategy, enabled=True)
        train_step = build_train_step(tf, keras, strategy, model, optimizer, scale, global_batch=BATCH * replicas)
        read_scale = lambda: (float(scale.scale.numpy()), int(scale.skipped.numpy()))  # noqa: E731
    history = []
    for _ in range(STEPS):
        loss = float(train_step(*next(batches)))
        history.append({"loss": loss, "scale": read_scale()[0], "skipped": read_scale()[1]})
    weights = [w.numpy() for w in model.trainable_variables]
    print(json.dumps({"worker": worker, "replicas": replicas, "history": history,
                      "finite": bool(all(np.isfinite(w).all() for w in weights)),
                      "checksum": float(sum(np.nan_to_num(w, posinf=1e30, neginf=-1e30).sum() for w in weights))}))
    return 0


def check_l2(strategy) -> int:
    """Two steps of SGD with coupled L2 on a layer whose gradient is zero (zero inputs, no bias)."""
    with strategy.scope():
        inputs = keras.Input((FEATURES,))
        model = keras.Model(inputs, keras.layers.Dense(CLASSES, use_bias=False)(inputs))
    replicas = strategy.num_replicas_in_sync
    optimizer = build_optimizer(keras, strategy, model, 0.1)
    step = build_train_step(tf, keras, strategy, model, optimizer, LossScale(tf, strategy, enabled=False),
                            global_batch=BATCH * replicas, weight_decay=0.1)
    data = tf.data.Dataset.from_tensors((tf.zeros((BATCH, FEATURES)), tf.zeros((BATCH,), tf.int32))).repeat()
    batches = iter(strategy.experimental_distribute_dataset(data.unbatch().batch(BATCH * replicas)))
    before = model.trainable_variables[0].numpy().tolist()
    for _ in range(2):
        step(*next(batches))
    print(json.dumps({"replicas": replicas, "before": before, "after": model.trainable_variables[0].numpy().tolist()}))
    return 0


def keras_step(strategy, model, replicas):
    """The trainer's step before it scaled the loss itself: Keras' LossScaleOptimizer over SGD."""
    with strategy.scope():
        optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=0.01, momentum=0.9))
        optimizer.build(model.trainable_variables)

    @tf.function
    def train_step(x, y):
        def replica(x, y):
            with tf.GradientTape() as tape:
                per_sample = keras.losses.sparse_categorical_crossentropy(y, model(x, training=True), from_logits=True)
                loss = tf.nn.compute_average_loss(per_sample, global_batch_size=BATCH * replicas)
                scaled = optimizer.scale_loss(loss)
            optimizer.apply_gradients(zip(tape.gradient(scaled, model.trainable_variables), model.trainable_variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica, args=(x, y)), axis=None)
    return train_step, lambda: (float(optimizer.dynamic_scale.numpy()), 0)


if __name__ == "__main__":
    with own_tempdir("eksbench-tf-checks-"):  # AutoGraph's files, which os._exit would leave behind
        code = main()
    sys.stdout.flush()
    os._exit(code)  # as the trainer: no TensorFlow teardown racing the other worker's exit
