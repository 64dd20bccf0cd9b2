"""PaddlePaddle's parameter-server training (``python -m workloads.train.paddle``): pservers and trainers."""
