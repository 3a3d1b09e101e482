//! Control characters and secrets in every human output: tables, explanations, logs, errors.
