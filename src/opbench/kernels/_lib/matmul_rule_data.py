"""The matmul shape rule's points, fitted on the tuning half of the traces; written
by ``benchmarks/tune/matmul_rule.py --write`` (rerun it rather than editing by hand).
Each point: (layout class, (M, N, K, batch), ((candidate, capped regret), ...)).
"""

FITTED_ON = "None, torch None, Triton None: 3 tuning-half products of paths.jsonl"
CAP = 0.3
K_NEAREST = 1

NEIGHBOURS: tuple = (
    ('rr1', (1024, 1024, 1024, 1), (('ptr:128x256x64/8w3s', 0.300), ('tma:128x128x64/4w4s', 0.000),)),
    ('rr1', (2048, 1024, 1024, 1), (('ptr:128x256x64/8w3s', 0.300), ('tma:128x128x64/4w4s', 0.000),)),
    ('rr1', (4096, 1024, 1024, 1), (('ptr:128x256x64/8w3s', 0.300), ('tma:128x128x64/4w4s', 0.000),)),
)  # fmt: skip
