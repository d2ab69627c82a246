-- SPDX-License-Identifier: BSD-3-Clause
-- wrk: every request says Connection: close, so each one is a new connection (over TLS,
-- a new full handshake: wrk offers no session to resume).
wrk.headers["Connection"] = "close"
