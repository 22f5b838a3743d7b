// Apache httpd 2.4 with mod_dav as a peer baseline (issue 14): what a team would set up instead
// of Trove for resources with ETags. Configured here in a temporary directory (generated
// config, its own port, event MPM, no root-owned paths written), started in the foreground and
// stopped with the benchmark. Needs the Debian package `apache2` (`apt-get install apache2`).

import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./servers.js";

const HTTPD = ["/usr/sbin/apache2", "/usr/sbin/httpd"].find((p) => existsSync(p));
const MODULES = ["/usr/lib/apache2/modules", "/usr/lib64/httpd/modules"].find((p) => existsSync(p));

/** Whether Apache httpd can be started here. */
export function apacheAvailable() {
  return HTTPD !== undefined && MODULES !== undefined;
}

function config(dir, port) {
  const modules = ["mpm_event", "authz_core", "mime", "dav", "dav_fs"];
  // As root, httpd's children drop to User/Group: www-data on Debian, nobody elsewhere.
  const user = process.getuid?.() === 0 ? "User www-data\nGroup www-data\n" : "";
  return `ServerRoot "${dir}"
Listen 127.0.0.1:${port}
ServerName 127.0.0.1
PidFile "${dir}/httpd.pid"
ErrorLog "${dir}/error.log"
LogLevel warn
# One access-log line per request, as Debian's default site has and as Trove logs at its defaults.
# (mod_log_config is built into Debian's httpd.)
LogFormat "%h %l %u %t \\"%r\\" %>s %O \\"%{Referer}i\\" \\"%{User-Agent}i\\"" combined
CustomLog "${dir}/access.log" combined
${modules.map((m) => `LoadModule ${m}_module "${MODULES}/mod_${m}.so"`).join("\n")}
${user}StartServers 2
ThreadsPerChild 32
MaxRequestWorkers 128
KeepAlive On
MaxKeepAliveRequests 0
TypesConfig /etc/mime.types
DavLockDB "${dir}/lock/DavLock"
DocumentRoot "${dir}/www"
<Directory "${dir}/www">
  Dav On
  # PROPFIND with Depth: infinity (the recursive listing case) is refused by default.
  DavDepthInfinity On
  Require all granted
</Directory>
`;
}

/** Starts httpd with mod_dav on a free port: { url, pid, stop() }. */
export async function startApache() {
  if (!apacheAvailable()) throw new Error("Apache httpd is not installed (apt-get install apache2)");
  const dir = mkdtempSync(join(tmpdir(), "trove-apache-"));
  for (const sub of ["www", "lock"]) mkdirSync(join(dir, sub));
  // The children run as www-data when started as root: they write resources and locks here.
  for (const p of [dir, join(dir, "www"), join(dir, "lock")]) chmodSync(p, 0o777);
  const port = await freePort();
  writeFileSync(join(dir, "httpd.conf"), config(dir, port));
  const child = spawn(HTTPD, ["-f", join(dir, "httpd.conf"), "-D", "FOREGROUND"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr.setEncoding("utf8").on("data", (s) => {
    output += s;
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`httpd exited ${child.exitCode}: ${output}`);
    try {
      await fetch(`${url}/`);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`httpd did not answer: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    pid: child.pid,
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Puts the benchmark's resources on Apache, as prepareTrove does on Trove. */
export async function prepareApache(server, body, get, put) {
  for (const path of [get, put]) {
    const answer = await fetch(server.url + path, { method: "PUT", body });
    if (answer.status !== 201 && answer.status !== 204) throw new Error(`Apache PUT ${path} answered ${answer.status}`);
  }
  const head = await fetch(server.url + get, { method: "HEAD" });
  return { ...server, auth: {}, get, put, etag: head.headers.get("etag") };
}
