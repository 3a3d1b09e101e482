//! The Kubernetes client: credentials (exec plugins, CA data), timeouts over a whole command, partial and refused answers.
