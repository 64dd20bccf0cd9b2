"""The TensorFlow trainer (``python -m workloads.train.tensorflow``): Keras models and tf.data pipelines
with the same data and arguments as the PyTorch trainer."""
