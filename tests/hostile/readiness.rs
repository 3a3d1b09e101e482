//! The status commands' verdicts on a directory source: evidence that is missing, conflicting or malformed never reads Ready.
