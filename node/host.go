package node

import (
	"net"
	"runtime"
	"strings"

	"github.com/google/cadvisor/lib/machine"
	"github.com/google/cadvisor/lib/utils/sysfs"
)

// Host is what pods are told of the machine: the address of status.hostIP
// (and of a hostNetwork pod's status.podIP), and the capacity that a
// resourceFieldRef of a container without limits reports.
type Host struct {
	IP          string
	MilliCPU    int64
	MemoryBytes int64
	// DNS is the host's resolver configuration, the base that a pod's
	// dnsConfig adds to under dnsPolicy Default; nil when unreadable.
	DNS *ResolvConf
}

// LocalHost returns this machine's Host: the address HostIP finds, and
// the cores and memory Gather reports (cAdvisor's, as the kubelet's node
// capacity).
func LocalHost() Host {
	cpus, memory, _ := capacity()
	h := Host{IP: HostIP(), MilliCPU: int64(cpus) * 1000, MemoryBytes: int64(memory)}
	if rc, err := readHostResolvConf(HostResolvConf, ResolvedResolvConf); err == nil {
		h.DNS = &rc
	}
	return h
}

// capacity returns the machine's cores and memory as cAdvisor counts them
// (the CPU topology of sysfs, MemTotal of /proc/meminfo). When the topology
// cannot be read the cores are the CPUs this process may use; memory that
// cannot be read is 0, and the error says why.
func capacity() (cpus int, memoryBytes uint64, err error) {
	if _, n, terr := machine.GetTopology(sysfs.NewRealSysFs()); terr == nil && n > 0 {
		cpus = n
	} else {
		cpus = runtime.NumCPU()
	}
	memoryBytes, err = machine.GetMachineMemoryCapacity()
	return cpus, memoryBytes, err
}

// HostIP is the node's address: the first global unicast IPv4 address of an
// interface that is up and not a loopback or a container bridge (docker*,
// veth*, br-*), else 127.0.0.1.
func HostIP() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 ||
			strings.HasPrefix(ifc.Name, "docker") || strings.HasPrefix(ifc.Name, "veth") || strings.HasPrefix(ifc.Name, "br-") {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
