"""One TensorFlow training step across every replica: the loss and its gradients, PyTorch's coupled L2, and for
amp-fp16 a dynamic loss scale whose overflow verdict every replica shares.

A pod's TensorFlow worker drives every GPU of its node (one replica each), and workers all-reduce across nodes.
Two faults of Keras 3.15 appear only with several replicas, so this step does their work itself:

- **An optimizer first built inside the step fails** under a multi-replica strategy (``You must feed a value for
  placeholder tensor 'cond/else/_1/cond/Placeholder'``; keras-team/keras#19246). ``build_optimizer`` builds it in
  ``strategy.scope()``, before any step.
- **``keras.mixed_precision.LossScaleOptimizer`` judges overflow per replica**: ``_tf_apply``
  (``keras/src/optimizers/loss_scale_optimizer.py``) checks each replica's own, not yet all-reduced, gradients
  and takes the first local replica's answer. When one replica overflows and another does not, workers take
  different branches and hang in the all-reduce only one of them calls; replicas of one worker apply ``-inf``
  and the scale does not halve. tf-keras all-reduced the gradients first for this reason. Here each replica's
  finite flag is all-reduced (one scalar: how many overflowed) before the verdict, so every replica of every
  worker takes the same branch; it runs in cross-replica context (``merge_call``), because a ``cond`` whose branch calls
  ``merge_call`` (``apply_gradients`` does) may not run in a replica context. Scale as Keras and torch's
  GradScaler: start at 2**15, halve on overflow (the step skipped), double after 2000 good steps.
- **Keras' ``weight_decay`` is decoupled** (``w -= lr * wd * w``, ``base_optimizer.py``): at momentum 0.9 about
  10x weaker than PyTorch SGD's coupled L2 (``g += wd * w``), which the PyTorch trainer uses. Here the L2 term is
  added to each replica's gradient share (``wd * w / replicas``: the optimizer sums the replicas' gradients).
"""

from __future__ import annotations

from typing import Any, Callable

INITIAL_SCALE = 2.0**15  # Keras' LossScaleOptimizer default (torch's GradScaler: 2**16)
GROWTH_STEPS = 2000  # Keras' dynamic_growth_steps, torch's growth_interval
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4  # coupled L2, as the PyTorch trainer's SGD (workloads.train.pytorch.optim)


def build_optimizer(keras: Any, strategy: Any, model: Any, lr: float) -> Any:
    """SGD with momentum (no decoupled decay: the step adds the L2 term), built in the strategy's scope."""
    with strategy.scope():
        optimizer = keras.optimizers.SGD(learning_rate=lr, momentum=MOMENTUM)
        optimizer.build(model.trainable_variables)
    return optimizer


class LossScale:
    """The amp-fp16 loss scale and its counters, mirrored on every replica, changed only in cross-replica context."""

    def __init__(self, tf: Any, strategy: Any, enabled: bool):
        self.enabled = enabled
        on_write, first = tf.VariableSynchronization.ON_WRITE, tf.VariableAggregation.ONLY_FIRST_REPLICA
        with strategy.scope():
            make = lambda value, dtype, name: tf.Variable(value, dtype=dtype, trainable=False, name=name,  # noqa: E731
                                                          synchronization=on_write, aggregation=first)
            self.scale = make(INITIAL_SCALE if enabled else 1.0, tf.float32, "loss_scale")
            self.good_steps = make(0, tf.int64, "loss_scale_good_steps")
            self.skipped = make(0, tf.int64, "skipped_steps")

    def after_finite(self, tf: Any) -> None:
        grow = self.good_steps >= GROWTH_STEPS - 1
        self.scale.assign(tf.where(grow, self.scale * 2.0, self.scale))
        self.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), self.good_steps + 1))

    def after_overflow(self, tf: Any) -> None:
        self.scale.assign(tf.maximum(self.scale * 0.5, 1.0))
        self.good_steps.assign(0)
        self.skipped.assign_add(1)


def all_finite(tf: Any, grads: list[Any]) -> Any:
    """True on every replica of every worker when no replica's gradients hold an inf or a NaN."""
    local = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
    overflowed = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM,
                                                                1.0 - tf.cast(local, tf.float32))
    return overflowed < 0.5  # ReduceOp has SUM and MEAN only: the number of replicas that overflowed


def build_train_step(tf: Any, keras: Any, strategy: Any, model: Any, optimizer: Any, scale: LossScale, *,
                     global_batch: int, weight_decay: float = WEIGHT_DECAY) -> Callable[[Any, Any], Any]:
    """``train_step(x, y)``: one step of every replica on its part of the global batch; returns the global mean
    loss, the same on every worker (``strategy.reduce`` all-reduces it)."""
    variables = model.trainable_variables
    decay = weight_decay / strategy.num_replicas_in_sync

    def apply(grads: list[Any]) -> None:
        optimizer.apply_gradients(zip(grads, variables))

    def apply_or_skip(distribution: Any, grads: list[Any], finite: Any) -> None:
        """Cross-replica: every replica's ``finite`` is the same (``all_finite``); the first one's decides."""
        def finite_branch() -> Any:
            distribution.extended.call_for_each_replica(apply, args=(grads,))
            scale.after_finite(tf)
            return tf.constant(True)

        def overflow_branch() -> Any:
            scale.after_overflow(tf)
            return tf.constant(False)
        tf.cond(distribution.experimental_local_results(finite)[0], finite_branch, overflow_branch)

    def replica(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            per_sample = keras.losses.sparse_categorical_crossentropy(y, model(x, training=True), from_logits=True)
            loss = tf.nn.compute_average_loss(per_sample, global_batch_size=global_batch)
            scaled = loss * scale.scale if scale.enabled else loss
        grads = tape.gradient(scaled, variables)
        if scale.enabled:
            grads = [g / scale.scale for g in grads]
        grads = [g + decay * w for g, w in zip(grads, variables)]
        if scale.enabled:
            tf.distribute.get_replica_context().merge_call(apply_or_skip, args=(grads, all_finite(tf, grads)))
        else:
            apply(grads)
        return loss

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica, args=(x, y)), axis=None)

    return train_step
