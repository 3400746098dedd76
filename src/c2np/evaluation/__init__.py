"""The evaluation harness (contract §6-8): predictions in, trustworthy numbers out.

One module per concept:

* :mod:`c2np.evaluation.harness` — the scoring loop over the evaluated rows (task 1 in
  worker processes), the failure rule, and the assembly of a results document;
* :mod:`c2np.evaluation.aggregate` — failure-penalised means, seeded bootstrap intervals,
  per-radius / per-material / per-split groups;
* :mod:`c2np.evaluation.results` — the :class:`~c2np.evaluation.results.Results` record,
  its schema and its content hash;
* :mod:`c2np.evaluation.misses` — a per-atom diagnosis of which atoms a task-1 prediction
  misses and why (holes, doubles, boundary and species mistakes).

Which rows are evaluated, what a model sees (queries) and what it is scored against (the
task-2 target) live in :mod:`c2np.tasks`; prediction files in :mod:`c2np.predictions`.
See docs/explanation/metrics.md for every rule.
"""
