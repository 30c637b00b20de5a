"""The engines a target (a team's own workflow code) runs on: per engine, its harness-side module and its worker
module (the process crashpoint kills), plus what every target worker shares (workerlib, effects)."""
