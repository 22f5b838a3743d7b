// `trove serve --help`, apart from the configuration's parser (config.ts) and the server: the
// `trove` command lists serve and its options without loading either.

export const SERVE_HELP = `Usage: trove serve [options]

Runs the Trove server: REST v2, gRPC, Connect and gRPC-Web on one port.

Options:
  --host HOST               address to listen on      (TROVE_HOST, default 127.0.0.1)
  --port PORT               port to listen on         (TROVE_PORT, default 13242)
  --data DIR                data directory            (TROVE_DATA, default ./.trove-data)
  --log-level LEVEL         fatal, error, warn, info, debug, trace or silent
                                                      (TROVE_LOG_LEVEL, default info)
  --log-buffer BYTES        log lines that may wait while stdout is not read; beyond them lines
                            are dropped and counted, never waited for (TROVE_LOG_BUFFER,
                            default 8388608; docs/operations.md, Logs)
  --max-resource-size BYTES largest resource accepted (TROVE_MAX_RESOURCE_SIZE, default 4294967296)
  --poll-wait SECONDS       longest a poll waits before 204 (TROVE_POLL_WAIT, default 30)
  --mongodb-url URL         keep everything on MongoDB instead of the embedded store
                            (TROVE_MONGODB_URL, e.g. mongodb://127.0.0.1:27017)
  --mongodb-database NAME   database on that server (TROVE_MONGODB_DATABASE, default trove)
  --filesystem-scan-lease S on MongoDB, seconds an instance scans a filesystem store's folder
                            without renewing its lease; others take over after it (docs/mongodb.md)
                                                      (TROVE_FILESYSTEM_SCAN_LEASE, default 30)
  --sqlite-synchronous MODE embedded store: normal (a write survives a crash of the process) or
                            full (also a power loss; slower PUTs: docs/storage.md, Durability)
                                                      (TROVE_SQLITE_SYNCHRONOUS, default normal)
  --issuer URL              OAuth 2.0 / OpenID issuer whose bearer tokens every request needs
                            (TROVE_ISSUER); without it, a development issuer runs under /auth/
  --audience AUD            audience (aud) tokens must carry (TROVE_AUDIENCE, default trove)
  --token-lifetime SECONDS  lifetime of development-issuer tokens (TROVE_TOKEN_LIFETIME, default 600)
  --report-availability D   how long a content-insights report stays available after it is
                            generated, e.g. 90d, 12h (TROVE_REPORT_AVAILABILITY, default 90d)
  --no-report-worker        generate no reports in this instance; others on the same MongoDB do
                            (TROVE_REPORT_WORKER=false)
  --metrics BOOL            serve Prometheus metrics at GET /metrics, without a token; false measures
                            nothing and answers 404 there (TROVE_METRICS, default true)
  --shutdown-timeout S      seconds SIGTERM / SIGINT let requests in flight finish before they are
                            cut; a second signal stops at once (TROVE_SHUTDOWN_TIMEOUT, default 10)
  --cors-origin ORIGIN      let browser pages of this origin (https://app.example.com) call every
                            face; repeat for more (TROVE_CORS_ORIGIN, comma-separated; default none)
  --console-client-id ID    public OAuth client id the console at /console/ signs in with
                            (TROVE_CONSOLE_CLIENT_ID, default trove-console; docs/console.md)
  --workers N               processes serving the port, one per core: N, or auto for the machine's
                            cores; they share the data directory or the MongoDB database, and
                            --max-connections is split between them (TROVE_WORKERS, default 1;
                            docs/operations.md, Several cores)

Limits (docs/security.md): a connection that never finishes a request is closed.
  --first-byte-timeout S    seconds a new connection may stay silent (TROVE_FIRST_BYTE_TIMEOUT, default 10)
  --headers-timeout S       seconds to send a complete HTTP/1.1 request head, else 408
                            (TROVE_HEADERS_TIMEOUT, default 20)
  --keep-alive-timeout S    seconds an HTTP/1.1 connection may stay idle between requests
                            (TROVE_KEEP_ALIVE_TIMEOUT, default 15)
  --session-idle-timeout S  seconds an HTTP/2 connection may stay without an open stream (PINGs
                            do not count; an unfinished header block gets --headers-timeout)
                            (TROVE_SESSION_IDLE_TIMEOUT, default 30)
  --max-concurrent-streams N  streams one HTTP/2 connection may have open at once
                            (TROVE_MAX_CONCURRENT_STREAMS, default 256)
  --max-connections N       connections open at once; beyond it HTTP/1.1 gets 503 with Retry-After
                            and HTTP/2 is closed (TROVE_MAX_CONNECTIONS, default auto, from the
                            open-file limit and the memory: docs/security.md, Capacity)
  --max-long-lived N        long polls, watches, report downloads and large uploads in flight at
                            once; beyond it 503 / UNAVAILABLE, so the other connections stay for
                            short requests (TROVE_MAX_LONG_LIVED, default auto, 4/5 of --max-connections)
  --min-body-rate BYTES     bytes a second a request body must bring over every --headers-timeout
                            window, else 408 and closed; 0: no minimum (TROVE_MIN_BODY_RATE, default 500)
  --max-long-lived-per-caller N  long-lived requests one authenticated subject may have in flight;
                            beyond it 429 + Retry-After / RESOURCE_EXHAUSTED, others unaffected
                            (TROVE_MAX_LONG_LIVED_PER_CALLER, default 1000)
  --max-long-lived-unauthenticated N  long-lived requests all callers without a token may have in
                            flight together (health watches, reflection); beyond it 429
                            (TROVE_MAX_LONG_LIVED_UNAUTHENTICATED, default 100)
  -h, --help                show this help
`;
