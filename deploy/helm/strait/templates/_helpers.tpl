{{/*
Names and labels.
*/}}
{{- define "strait.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "strait.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "strait.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "strait.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strait.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strait.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strait.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "strait.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "strait.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strait.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Where the ConfigMap holding strait.yaml is mounted. A directory of its own
(not a subPath mount) so that a changed ConfigMap reaches the running pods,
which a reload (SIGHUP, POST /-/reload) then picks up.
*/}}
{{- define "strait.configDir" -}}/etc/strait/config{{- end -}}

{{/*
strait.listen parses a listen address of the config: dict "field" (its path,
for messages) "value" (host:port). It returns YAML {host, port}. The port must
be written out: the chart opens the ports the config names, so it cannot
follow an ${env:...} reference. A loopback host is refused: nothing outside
the pod could connect to it, probes included.
*/}}
{{- define "strait.listen" -}}
{{- $v := toString (.value | default "") -}}
{{- if eq $v "" -}}
{{- fail (printf "%s is required: the chart opens the ports the config listens on" .field) -}}
{{- end -}}
{{- if not (regexMatch "^(\\[[0-9a-fA-F:.]*\\]|[^:\\[\\]$]*):[0-9]{1,5}$" $v) -}}
{{- fail (printf "%s: %q is not host:port with the port written out (as 0.0.0.0:19092 or :19092): the chart reads the port to open from it and cannot follow ${env:...} there" .field $v) -}}
{{- end -}}
{{- $portPart := regexFind ":[0-9]+$" $v -}}
{{- $port := trimPrefix ":" $portPart | atoi -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "%s: port %d is outside 1-65535" .field $port) -}}
{{- end -}}
{{- $host := trimSuffix $portPart $v | trimPrefix "[" | trimSuffix "]" -}}
{{- if or (eq $host "localhost") (eq $host "::1") (hasPrefix "127." $host) -}}
{{- fail (printf "%s: %q listens on loopback, which nothing outside the pod can reach (probes and Services included): listen on 0.0.0.0:%d (or :%d) and set advertised_host to the name clients connect to" .field $v $port $port) -}}
{{- end -}}
host: {{ $host | quote }}
port: {{ $port }}
{{- end -}}

{{/*
strait.ports lists every port the config listens on, as YAML {ports: [{name,
port, kind}]}: the admin listener; per virtual cluster its listen port and,
unless it routes by SNI on that one port, every port of node_ports (with the
defaults Strait applies: start = listen port + 1, end = start + 999 at most
65535); each tls_passthrough listener; each LLM listener. The Deployment's
container ports and the Services are all rendered from this list, so they
cannot disagree with the config. A port two listeners share (on different
hosts) is listed once.
*/}}
{{- define "strait.ports" -}}
{{- $cfg := .Values.config | default dict -}}
{{- $ports := list -}}
{{- $seen := dict -}}
{{- $admin := (dict "listen" "") -}}
{{- if $cfg.admin -}}{{- $admin = $cfg.admin -}}{{- end -}}
{{- if not $admin.listen -}}
{{- fail "config.admin.listen is required by the chart: its liveness and readiness probes (/healthz, /readyz) and Prometheus scrapes (/metrics) use the admin listener; set it, e.g. 0.0.0.0:9190" -}}
{{- end -}}
{{- $a := include "strait.listen" (dict "field" "config.admin.listen" "value" $admin.listen) | fromYaml -}}
{{- $ports = append $ports (dict "name" "admin" "port" (int $a.port) "kind" "admin") -}}
{{- $_ := set $seen (toString $a.port) "config.admin.listen" -}}
{{- range $i, $vc := $cfg.virtual_clusters | default list -}}
{{- $field := printf "config.virtual_clusters[%d]" $i -}}
{{- $l := include "strait.listen" (dict "field" (printf "%s.listen" $field) "value" $vc.listen) | fromYaml -}}
{{- if not (hasKey $seen (toString $l.port)) -}}
{{- $ports = append $ports (dict "name" (printf "kafka-%d" $i) "port" (int $l.port) "kind" "kafka") -}}
{{- $_ := set $seen (toString $l.port) (printf "%s.listen" $field) -}}
{{- end -}}
{{- if not (hasKey $vc "sni") -}}
{{- $np := $vc.node_ports | default dict -}}
{{- $start := add (int $l.port) 1 -}}
{{- if $np.start -}}{{- $start = int $np.start -}}{{- end -}}
{{- $end := min (add $start 999) 65535 -}}
{{- if $np.end -}}{{- $end = int $np.end -}}{{- end -}}
{{- if lt $end $start -}}
{{- fail (printf "%s.node_ports: end %d is below start %d" $field $end $start) -}}
{{- end -}}
{{- $count := add (sub $end $start) 1 -}}
{{- if gt $count (int $.Values.maxNodePortsPerCluster) -}}
{{- fail (printf "%s.node_ports: %d ports (%d-%d), and the chart opens each one on the pod and the Service (at most maxNodePortsPerCluster, %d): set node_ports.end to start + the highest broker node id (e.g. end: %d for node ids 0-2), or route by SNI on one port" $field $count $start $end (int $.Values.maxNodePortsPerCluster) (add $start 2)) -}}
{{- end -}}
{{- range $n := untilStep (int $start) (int (add $end 1)) 1 -}}
{{- if not (hasKey $seen (toString $n)) -}}
{{- $ports = append $ports (dict "name" (printf "kafka-%d-%d" $i (sub $n $start)) "port" $n "kind" "kafka") -}}
{{- $_ := set $seen (toString $n) (printf "%s.node_ports" $field) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $i, $tp := $cfg.tls_passthrough | default list -}}
{{- $l := include "strait.listen" (dict "field" (printf "config.tls_passthrough[%d].listen" $i) "value" $tp.listen) | fromYaml -}}
{{- if not (hasKey $seen (toString $l.port)) -}}
{{- $ports = append $ports (dict "name" (printf "tls-pt-%d" $i) "port" (int $l.port) "kind" "passthrough") -}}
{{- $_ := set $seen (toString $l.port) (printf "config.tls_passthrough[%d].listen" $i) -}}
{{- end -}}
{{- end -}}
{{- if $cfg.llm -}}
{{- range $i, $ll := $cfg.llm.listeners | default list -}}
{{- $l := include "strait.listen" (dict "field" (printf "config.llm.listeners[%d].listen" $i) "value" $ll.listen) | fromYaml -}}
{{- if not (hasKey $seen (toString $l.port)) -}}
{{- $ports = append $ports (dict "name" (printf "llm-%d" $i) "port" (int $l.port) "kind" "llm") -}}
{{- $_ := set $seen (toString $l.port) (printf "config.llm.listeners[%d].listen" $i) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if eq (len $ports) 1 -}}
{{- fail "config has no virtual_clusters, tls_passthrough or llm listeners: the chart has nothing to serve; give your Strait config under config (docs/config.md, docs/deploy.md)" -}}
{{- end -}}
{{- toYaml (dict "ports" $ports) -}}
{{- end -}}

{{/*
strait.durationSeconds turns a Go duration string (30s, 1m30s, 500ms) into
whole seconds, rounded up. dict "field" "value".
*/}}
{{- define "strait.durationSeconds" -}}
{{- $v := toString .value -}}
{{- if not (or (eq $v "0") (regexMatch "^([0-9]*\\.?[0-9]+(ns|us|µs|ms|s|m|h))+$" $v)) -}}
{{- fail (printf "%s: %q is not a duration such as 30s or 1m30s (the chart derives terminationGracePeriodSeconds from it, so it cannot follow ${env:...})" .field $v) -}}
{{- end -}}
{{- $total := 0.0 -}}
{{- range $part := regexFindAll "[0-9]*\\.?[0-9]+(ns|us|µs|ms|s|m|h)" $v -1 -}}
{{- $num := regexFind "^[0-9]*\\.?[0-9]+" $part -}}
{{- $unit := trimPrefix $num $part -}}
{{- $scale := get (dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0) $unit -}}
{{- $total = addf $total (mulf (float64 $num) $scale) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}

{{/*
strait.drainSeconds is shutdown.drain_timeout in seconds (Strait's default:
30s).
*/}}
{{- define "strait.drainSeconds" -}}
{{- $cfg := .Values.config | default dict -}}
{{- $d := "30s" -}}
{{- if and $cfg.shutdown (hasKey $cfg.shutdown "drain_timeout") (not (kindIs "invalid" $cfg.shutdown.drain_timeout)) -}}
{{- $d = $cfg.shutdown.drain_timeout -}}
{{- end -}}
{{- include "strait.durationSeconds" (dict "field" "config.shutdown.drain_timeout" "value" $d) -}}
{{- end -}}

{{/*
strait.terminationGrace: how long Kubernetes waits after SIGTERM before it
kills the pod. Strait stops accepting on SIGTERM and gives in-flight
requests drain_timeout to finish, so the grace must be longer than the
pre-stop sleep plus drain_timeout, or the drain is cut short by SIGKILL.
*/}}
{{- define "strait.terminationGrace" -}}
{{- $drain := include "strait.drainSeconds" . | int -}}
{{- $floor := add $drain (int .Values.preStopSleepSeconds) -}}
{{- if not (kindIs "invalid" .Values.terminationGracePeriodSeconds) -}}
{{- $g := int .Values.terminationGracePeriodSeconds -}}
{{- if le $g $floor -}}
{{- fail (printf "terminationGracePeriodSeconds: %d is not longer than config.shutdown.drain_timeout (%ds) plus preStopSleepSeconds (%d): Kubernetes would kill Strait before it drains; leave it empty to derive it, or make it at least %d" $g $drain (int .Values.preStopSleepSeconds) (add $floor 1)) -}}
{{- end -}}
{{- $g -}}
{{- else -}}
{{- add $floor (int .Values.terminationGraceMarginSeconds) -}}
{{- end -}}
{{- end -}}

{{/*
strait.walkPaths collects the files the config names, into .acc.paths as
{field, path, ownerOnly}: every *_file key, a schema definition's file, the
credential store (credentials), a KMS's vault path (kms.path,
kms.previous.path) and every ${file:PATH} reference. The credential store and the vault are ownerOnly:
Strait refuses them when group or others may read them.
*/}}
{{- define "strait.walkPaths" -}}
{{- $node := .node -}}
{{- $acc := .acc -}}
{{- if kindIs "map" $node -}}
{{- range $k, $v := $node -}}
{{- $field := printf "%s.%s" $.field $k -}}
{{- if kindIs "string" $v -}}
{{- $isFile := or (hasSuffix "_file" $k) (eq $k "file") (eq $k "credentials") (and (eq $k "path") (or (eq $.key "kms") (eq $.key "previous"))) -}}
{{- $owner := or (eq $k "credentials") (eq $k "path") -}}
{{- if and $isFile (ne $v "") (not (hasPrefix "${" $v)) -}}
{{- $_ := set $acc "paths" (append $acc.paths (dict "field" $field "path" $v "ownerOnly" $owner)) -}}
{{- end -}}
{{- end -}}
{{- include "strait.walkPaths" (dict "node" $v "field" $field "key" $k "acc" $acc) -}}
{{- end -}}
{{- else if kindIs "slice" $node -}}
{{- range $i, $v := $node -}}
{{- include "strait.walkPaths" (dict "node" $v "field" (printf "%s[%d]" $.field $i) "key" $.key "acc" $acc) -}}
{{- end -}}
{{- else if kindIs "string" $node -}}
{{- range $ref := regexFindAll "\\$\\{file:[^}]+\\}" $node -1 -}}
{{- $_ := set $acc "paths" (append $acc.paths (dict "field" $.field "path" (trimSuffix "}" (trimPrefix "${file:" $ref)) "ownerOnly" false)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
strait.mounts decides how each secrets entry is mounted, as YAML {secrets:
[{name, mountPath, volume, ownerOnly, ...}]}, after checking that every
file the config names is absolute and inside a secrets entry or an
extraVolumeMounts entry. An entry holding the credential store or a vault
is ownerOnly unless it says otherwise: Kubernetes mounts Secret files
group-readable (fsGroup), which Strait refuses for those, so they are
copied owner-only by an init container instead.
*/}}
{{- define "strait.mounts" -}}
{{- $acc := dict "paths" list -}}
{{- include "strait.walkPaths" (dict "node" (.Values.config | default dict) "field" "config" "key" "" "acc" $acc) -}}
{{- $secrets := list -}}
{{- $mountSeen := dict (include "strait.configDir" .) "the config" -}}
{{- range $i, $s := .Values.secrets | default list -}}
{{- if not $s.name -}}
{{- fail (printf "secrets[%d].name is required: the name of a Secret in the release's namespace" $i) -}}
{{- end -}}
{{- if not (hasPrefix "/" (toString $s.mountPath)) -}}
{{- fail (printf "secrets[%d].mountPath: %q must be an absolute directory, such as /etc/strait/tls" $i (toString $s.mountPath)) -}}
{{- end -}}
{{- $mp := trimSuffix "/" $s.mountPath -}}
{{- if hasKey $mountSeen $mp -}}
{{- fail (printf "secrets[%d].mountPath: %s is already the mount of %s: give each Secret a directory of its own" $i $mp (get $mountSeen $mp)) -}}
{{- end -}}
{{- $_ := set $mountSeen $mp (printf "secrets[%d]" $i) -}}
{{- $entry := dict "index" $i "name" $s.name "mountPath" $mp "volume" (printf "secret-%d" $i) "ownerOnly" false -}}
{{- if $s.items -}}{{- $_ := set $entry "items" $s.items -}}{{- end -}}
{{- if not (kindIs "invalid" $s.defaultMode) -}}{{- $_ := set $entry "defaultMode" $s.defaultMode -}}{{- end -}}
{{- $secrets = append $secrets $entry -}}
{{- end -}}
{{- range $p := $acc.paths -}}
{{- if not (hasPrefix "/" $p.path) -}}
{{- fail (printf "%s: %q is relative: in the chart, name files by absolute paths inside a secrets entry's mountPath (e.g. /etc/strait/tls/tls.crt)" $p.field $p.path) -}}
{{- end -}}
{{- $found := false -}}
{{- range $e := $secrets -}}
{{- if or (eq $p.path $e.mountPath) (hasPrefix (printf "%s/" $e.mountPath) $p.path) -}}
{{- $found = true -}}
{{- if $p.ownerOnly -}}{{- $_ := set $e "holdsOwnerOnly" $p.field -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- range $m := $.Values.extraVolumeMounts | default list -}}
{{- $mp := trimSuffix "/" (toString $m.mountPath) -}}
{{- if or (eq $p.path $mp) (hasPrefix (printf "%s/" $mp) $p.path) -}}
{{- $found = true -}}
{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "%s: %s is in no mounted volume: add a secrets entry for the Secret that holds it, with a mountPath that contains it (e.g. name: strait-files, mountPath: %s), or an extraVolumeMounts entry" $p.field $p.path (dir $p.path)) -}}
{{- end -}}
{{- end -}}
{{- range $e := $secrets -}}
{{- $s := index $.Values.secrets (int $e.index) -}}
{{- if hasKey $s "ownerOnly" -}}
{{- $_ := set $e "ownerOnly" (eq (toString $s.ownerOnly) "true") -}}
{{- else if $e.holdsOwnerOnly -}}
{{- $_ := set $e "ownerOnly" true -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "secrets" $secrets) -}}
{{- end -}}
