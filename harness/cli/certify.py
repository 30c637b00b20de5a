"""``crashpoint certify``: sweep the conformance pack (or another) on an adapter and print/write the certificate.

    crashpoint certify --adapter MODULE:CLASS [PACK] [--out DIR] [--workers N] [--executor SPEC]
                       [--progress|--no-progress] [--worker-timeout S] [--crash-point ID ...] [--workdir DIR] [-q]

Exit 0 when every claim passed (``unsupported`` claims are listed, and also exit 1: certification
allows nothing skipped), 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _cmd_certify(args: argparse.Namespace) -> int:
    from crashpoint.errors import UsageError
    from crashpoint.harness.run.certification import certify, markdown, write
    from crashpoint.harness.cli.main import check_sweep_options, progress_for, resolve_path
    from crashpoint.paths import output_folder
    from crashpoint.harness.run.executors import describe, make_executor

    spec = args.adapter or args.engine
    if not spec:
        raise UsageError("certify needs --adapter MODULE:CLASS (for example "
                         "crashpoint.harness.adapters.reference:ReferenceAdapter)")
    check_sweep_options(args)
    output_folder(args.out, "--out", files_only=True)
    pack = resolve_path(args.pack_option or args.pack)

    executor, close_executor = make_executor(args.executor, args.workers)  # exit 2 here if Dask is unreachable
    bar = progress_for(args)
    try:
        print(f"crashpoint: certifying {spec} on pack {pack}, on {describe(executor)}", flush=True)
        cert = certify(spec, pack, worker_timeout_s=args.worker_timeout, only=args.crash_point or (),
                       workdir=args.workdir, progress=bar.result, on_plan=bar.plan, executor=executor)
    finally:
        bar.close()
        close_executor()
    print(markdown(cert))
    json_path, md_path = write(cert, args.out)
    print(f"certificate written to {json_path} and {md_path}")
    return 0 if all(c["verdict"] == "passed" for c in cert["claims"]) else 1


def add_certify_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``certify`` on the ``crashpoint`` sub-command parser."""
    cert = sub.add_parser("certify", help="sweep the conformance pack on an engine adapter and grade its claims")
    cert.add_argument("pack", nargs="?", default="conformance",
                      help="pack folder or built-in pack name (default: conformance)")
    cert.add_argument("--pack", dest="pack_option", metavar="PACK", help="same as the positional PACK")
    cert.add_argument("--adapter", metavar="MODULE:CLASS",
                      help="the engine's adapter: a class, factory or instance implementing EngineAdapter")
    cert.add_argument("--engine", metavar="MODULE:CLASS", help="alias of --adapter")
    cert.add_argument("--out", type=Path, default=Path("certificates"),
                      help="folder for certificate-<engine>.json and .md (default: ./certificates)")
    from crashpoint.harness.cli.main import add_parallel_options

    add_parallel_options(cert)
    cert.add_argument("--worker-timeout", type=float, default=60.0, metavar="S",
                      help="wall seconds a worker may take (default 60)")
    cert.add_argument("--crash-point", action="append", metavar="ID",
                      help="only this crash point (repeatable; a partial sweep, for quick checks)")
    cert.add_argument("--workdir", type=Path, help="keep run folders here")
    cert.add_argument("-q", "--quiet", action="store_true", help="no progress dots (nor an automatic bar)")
    cert.set_defaults(func=_cmd_certify)
