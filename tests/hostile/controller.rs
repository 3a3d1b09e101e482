//! `status controller`: shutdown, health and leadership when the API is slow, hangs or lies about time.
