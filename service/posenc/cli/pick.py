"""`posenc pick --target-context N [--model-config config.json] [--goal train|extend] [--extrapolate]
[--training-budget none|fine_tune|full] [--latency normal|tight] ...`.

Which positional encoding, with which parameters, for a job: a new model (its scheme, RoPE base, ALiBi
slopes) or an existing checkpoint taken to a longer context (the scaling, its factor and attention
factor, the config.json keys to set and what posenc computes for them). Every reason cites a row of
the lab's measurements (the documented-size run shipped with posenc, or --results) or a primary source.
"""

from __future__ import annotations

import json
import sys

from ..errors import PosencError


def register(sub) -> None:
    p = sub.add_parser("pick", help="which encoding and parameters for a job, each reason citing the lab or a paper",
                       description=__doc__.split("\n\n", 1)[1])
    p.add_argument("--target-context", type=int, required=True, metavar="N", help="the context length to serve")
    p.add_argument("--model-config", metavar="CONFIG",
                   help="the model's config.json (or its directory) to extend: what reaching N needs")
    p.add_argument("--original-context", type=int, metavar="N",
                   help="extend a RoPE model trained at N positions (instead of --model-config)")
    p.add_argument("--goal", choices=["train", "extend"],
                   help="train a new model, or extend a checkpoint (default: extend with --model-config or "
                        "--original-context, else train)")
    p.add_argument("--extrapolate", action="store_true",
                   help="the model must work past the length it is trained at (train short, test long)")
    p.add_argument("--train-context", type=int, metavar="N",
                   help="a new model trains at N positions (< --target-context: it must extrapolate)")
    p.add_argument("--training-budget", choices=["none", "fine_tune", "full"],
                   help="none: no training (test-time scaling); fine_tune: a short run; full: (continued) "
                        "pre-training (default: full to train, none to extend)")
    p.add_argument("--latency", choices=["normal", "tight"], default="normal",
                   help="tight: per-token latency decides (leaves out dynamic NTK; ALiBi needs a fused kernel)")
    p.add_argument("--n-heads", type=int, metavar="H", help="attention heads (ALiBi's slopes)")
    p.add_argument("--head-dim", type=int, metavar="D", help="head size of a new RoPE model (default 128)")
    p.add_argument("--results", metavar="FILE", help="a `posenc lab` results file to reason from (default: the "
                                                     "documented-size run shipped with posenc)")
    p.add_argument("--patched-config", metavar="FILE",
                   help="write the model's config.json with the recommended keys set (extending a config)")
    p.add_argument("--json", action="store_true", help="the whole answer as JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    from ..models import config_dict
    from ..pick import pick

    config = config_dict(args.model_config) if args.model_config is not None else None
    answer = pick(args.target_context, goal=args.goal, extrapolate=args.extrapolate,
                  train_context=args.train_context, training_budget=args.training_budget, latency=args.latency,
                  n_heads=args.n_heads, head_dim=args.head_dim, original_context=args.original_context,
                  config=config, results=args.results)
    if args.patched_config is not None:
        if answer.config_patch is None:
            raise PosencError("patched_config", "this answer has no config.json keys to set (nothing to change, "
                              "no config given, or keys posenc could not verify)")
        with open(args.patched_config, "w") as out:
            json.dump({**config, **answer.config_patch}, out, indent=2)
        print(f"wrote {args.patched_config}: `posenc positions {args.patched_config} --positions 0,"
              f"{args.target_context - 1}` shows its encoding", file=sys.stderr)
    if args.json:
        print(json.dumps(answer.to_dict(), indent=1))
    else:
        print(answer.to_text())
    return 0
