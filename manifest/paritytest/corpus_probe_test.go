package paritytest

func addProbeAndHookCases(b *corpusBuilder) {
	c := "spec.containers[0]"
	live, ready, startup := c+".livenessProbe", c+".readinessProbe", c+".startupProbe"

	// Handlers.
	b.mut("probe/no-handler", "full", set(live, M{"periodSeconds": 10}))
	b.mut("probe/two-handlers", "full", set(live+".exec", M{"command": L{"true"}}))
	b.mut("probe/exec-empty", "full", set(live, M{"exec": M{"command": L{}}}))
	b.mut("probe/http-port-zero", "full", set(live+".httpGet.port", 0))
	b.mut("probe/http-port-65536", "full", set(live+".httpGet.port", 65536))
	b.mut("probe/http-port-name-long", "full", set(live+".httpGet.port", "http-alternative"))
	b.mut("probe/http-port-name-unknown", "full", set(live+".httpGet.port", "admin"))
	b.mut("probe/http-port-name-upper", "full", set(live+".httpGet.port", "HTTP"))
	b.mut("probe/http-port-string-number", "full", set(live+".httpGet.port", "8080"))
	b.mut("probe/http-scheme-bad", "full", set(live+".httpGet.scheme", "FTP"))
	b.mut("probe/http-scheme-lower", "full", set(live+".httpGet.scheme", "https"))
	b.mut("probe/http-header-bad", "full", set(live+".httpGet.httpHeaders[0].name", "X Probe"))
	b.mut("probe/http-header-empty", "full", set(live+".httpGet.httpHeaders[0].name", ""))
	b.mut("probe/http-path-empty", "full", set(live+".httpGet.path", ""))
	b.mut("probe/http-path-relative", "full", set(live+".httpGet.path", "healthz"))
	b.mut("probe/http-host-name", "full", set(live+".httpGet.host", "localhost"))
	b.mut("probe/tcp-port-zero", "full", set(ready+".tcpSocket.port", 0))
	b.mut("probe/tcp-port-name-unknown", "full", set(ready+".tcpSocket.port", "admin"))
	b.mut("probe/tcp-host", "full", set(ready+".tcpSocket.host", "127.0.0.1"))
	b.mut("probe/grpc-port-zero", "full", set(startup+".grpc.port", 0))
	b.mut("probe/grpc-port-65536", "full", set(startup+".grpc.port", 65536))
	b.mut("probe/grpc-port-name", "full", set(startup+".grpc.port", "http"))
	b.mut("probe/grpc-service", "full", set(startup+".grpc.service", "liveness"))

	// Numbers.
	b.mut("probe/initial-delay-negative", "full", set(live+".initialDelaySeconds", -1))
	b.mut("probe/timeout-zero", "full", set(live+".timeoutSeconds", 0))
	b.mut("probe/timeout-negative", "full", set(live+".timeoutSeconds", -1))
	b.mut("probe/period-negative", "full", set(live+".periodSeconds", -1))
	b.mut("probe/failure-negative", "full", set(live+".failureThreshold", -1))
	b.mut("probe/success-negative", "full", set(ready+".successThreshold", -1))
	b.mut("probe/liveness-success-2", "full", set(live+".successThreshold", 2))
	b.mut("probe/startup-success-2", "full", set(startup+".successThreshold", 2))
	b.mut("probe/liveness-grace-zero", "full", set(live+".terminationGracePeriodSeconds", 0))
	b.mut("probe/liveness-grace-negative", "full", set(live+".terminationGracePeriodSeconds", -1))
	b.mut("probe/startup-grace", "full", set(startup+".terminationGracePeriodSeconds", 5))
	b.mut("probe/readiness-grace", "full", set(ready+".terminationGracePeriodSeconds", 10))
	b.mut("probe/sidecar-readiness-grace", "full", set("spec.initContainers[1].readinessProbe.terminationGracePeriodSeconds", 10))
	b.mut("probe/sidecar-startup-success-2", "full", set("spec.initContainers[1].startupProbe.successThreshold", 2))
	b.mut("probe/etcd-port-name-unknown", "etcd", set(c+".ports[0].name", "metrics"))

	// Lifecycle hooks.
	post, pre := c+".lifecycle.postStart", c+".lifecycle.preStop"
	b.mut("hook/no-handler", "full", set(post, M{}))
	b.mut("hook/two-handlers", "full", set(post+".sleep", M{"seconds": 1}))
	b.mut("hook/exec-empty", "full", set(post+".exec.command", L{}))
	b.mut("hook/http-port-zero", "full", set(pre+".httpGet.port", 0))
	b.mut("hook/http-port-name-unknown", "full", set(pre+".httpGet.port", "admin"))
	b.mut("hook/http-scheme-bad", "full", set(pre+".httpGet.scheme", "FTP"))
	b.mut("hook/tcp", "full", set(pre, M{"tcpSocket": M{"port": 8080}}))
	b.mut("hook/tcp-port-zero", "full", set(pre, M{"tcpSocket": M{"port": 0}}))
	b.mut("hook/grpc", "full", set(pre, M{"grpc": M{"port": 9090}}))
	b.mut("hook/sleep-zero", "full", set(pre, M{"sleep": M{"seconds": 0}}))
	b.mut("hook/sleep-negative", "full", set(pre, M{"sleep": M{"seconds": -1}}))
	b.mut("hook/sleep-equals-grace", "full", set(pre, M{"sleep": M{"seconds": 30}}))
	b.mut("hook/sleep-over-grace", "full", set(pre, M{"sleep": M{"seconds": 31}}))
	b.mut("hook/sleep-over-default-grace", "minimal", set(c+".lifecycle.preStop.sleep.seconds", 31))
	b.mut("hook/sleep-poststart-over", "full", set(post, M{"sleep": M{"seconds": 60}}))
	b.mut("hook/sidecar-sleep-over-grace", "full", set("spec.terminationGracePeriodSeconds", 1))
	b.mut("hook/empty-lifecycle", "full", set(c+".lifecycle", M{}))
}
