//! `edpm-agent run`: the job's inputs (environment, extra vars, job events), its summary and termination message, and the secrets they must never show.
