package paritytest

// Cases that set the fields the rest of the corpus does not reach, each
// valid where it can be, so that every field of every type a Pod holds is
// in the corpus (TestCorpusCoversEveryField); and one case for each field
// added since Kubernetes v1.34 (podrun's API types and harness are v1.37).
func addFieldCases(b *corpusBuilder) {
	vol := func(name string, src M) {
		src["name"] = "data"
		b.mut("field/"+name, "minimal", set("spec.volumes", L{src}))
	}
	secretRef := M{"name": "creds"}
	vol("aws-ebs-all", M{"awsElasticBlockStore": M{"volumeID": "vol-1", "fsType": "ext4", "partition": 1, "readOnly": true}})
	vol("azure-disk-all", M{"azureDisk": M{"diskName": "d", "diskURI": "https://acct.blob.core.windows.net/c/d.vhd",
		"cachingMode": "ReadOnly", "fsType": "ext4", "readOnly": true, "kind": "Shared"}})
	vol("azure-file-all", M{"azureFile": M{"secretName": "s", "shareName": "share", "readOnly": true}})
	vol("csi-all", M{"csi": M{"driver": "csi.example.com", "fsType": "ext4", "readOnly": true, "nodePublishSecretRef": secretRef}})
	vol("cephfs-all", M{"cephfs": M{"monitors": L{"10.0.0.1:6789"}, "path": "/", "user": "admin",
		"secretFile": "/etc/ceph/secret", "secretRef": secretRef, "readOnly": true}})
	vol("cinder-all", M{"cinder": M{"volumeID": "vol-1", "fsType": "ext4", "readOnly": true, "secretRef": secretRef}})
	vol("fc-all", M{"fc": M{"targetWWNs": L{"500a0981891b8dc5"}, "lun": 0, "fsType": "ext4", "readOnly": true}})
	vol("fc-wwids", M{"fc": M{"wwids": L{"3600508b400105e210000900000490000"}}})
	vol("flex-all", M{"flexVolume": M{"driver": "example.com/flex", "fsType": "ext4", "readOnly": true, "secretRef": secretRef,
		"options": M{"example.com/size": "1Gi"}}})
	vol("gce-pd-all", M{"gcePersistentDisk": M{"pdName": "disk", "fsType": "ext4", "partition": 1, "readOnly": true}})
	vol("git-repo-all", M{"gitRepo": M{"repository": "https://example.com/repo.git", "revision": "main", "directory": "."}})
	vol("glusterfs-all", M{"glusterfs": M{"endpoints": "ep", "path": "vol", "readOnly": true}})
	vol("iscsi-all", M{"iscsi": M{"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:storage", "lun": 0,
		"chapAuthDiscovery": true, "chapAuthSession": true, "fsType": "ext4", "initiatorName": "iqn.2001-04.com.example:node1",
		"iscsiInterface": "default", "portals": L{"10.0.0.2:3260"}, "readOnly": true, "secretRef": secretRef}})
	vol("image-all", M{"image": M{"reference": "podrun/busybox:test", "pullPolicy": "IfNotPresent"}})
	vol("nfs-all", M{"nfs": M{"server": "nfs.example.com", "path": "/exports", "readOnly": true}})
	vol("pvc-all", M{"persistentVolumeClaim": M{"claimName": "data", "readOnly": true}})
	vol("photon-all", M{"photonPersistentDisk": M{"pdID": "pd", "fsType": "ext4"}})
	vol("portworx-all", M{"portworxVolume": M{"volumeID": "v", "fsType": "ext4", "readOnly": true}})
	vol("quobyte-all", M{"quobyte": M{"registry": "quobyte.example.com:7861", "volume": "v", "group": "g", "user": "u",
		"tenant": "0d3b9c6e-0b7f-4d0e-9a59-0f5f1b4f0a11", "readOnly": true}})
	vol("rbd-all", M{"rbd": M{"monitors": L{"10.0.0.1:6789"}, "image": "img", "fsType": "ext4", "pool": "rbd", "user": "admin",
		"keyring": "/etc/ceph/keyring", "secretRef": secretRef, "readOnly": true}})
	vol("scaleio-all", M{"scaleIO": M{"gateway": "https://gw", "system": "sys", "secretRef": secretRef, "volumeName": "v",
		"fsType": "xfs", "protectionDomain": "pd", "readOnly": true, "sslEnabled": true, "storageMode": "ThinProvisioned", "storagePool": "sp"}})
	vol("storageos-all", M{"storageos": M{"volumeName": "vol", "volumeNamespace": "ns", "fsType": "ext4", "readOnly": true, "secretRef": secretRef}})
	vol("vsphere-all", M{"vsphereVolume": M{"volumePath": "[ds] vol.vmdk", "fsType": "ext4", "storagePolicyName": "gold", "storagePolicyID": "id"}})
	claimSpec := M{"accessModes": L{"ReadWriteOnce"}, "resources": M{"requests": M{"storage": "1Gi"}, "limits": M{"storage": "2Gi"}},
		"storageClassName": "fast", "volumeMode": "Filesystem", "selector": M{"matchLabels": M{"tier": "db"}},
		"dataSource":    M{"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"},
		"dataSourceRef": M{"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"}}
	vol("ephemeral-claim-all", M{"ephemeral": M{"volumeClaimTemplate": M{"metadata": M{"labels": M{"app": "web"}}, "spec": claimSpec}}})
	vol("ephemeral-volume-name", M{"ephemeral": M{"volumeClaimTemplate": M{"spec": M{"accessModes": L{"ReadWriteOnce"},
		"resources": M{"requests": M{"storage": "1Gi"}}, "volumeName": "pv-1", "volumeAttributesClassName": "gold"}}}})
	vol("ephemeral-ref-namespace", M{"ephemeral": M{"volumeClaimTemplate": M{"spec": M{"accessModes": L{"ReadWriteOnce"},
		"resources":     M{"requests": M{"storage": "1Gi"}},
		"dataSourceRef": M{"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap", "namespace": "other"}}}}})
	vol("ephemeral-source-mismatch", M{"ephemeral": M{"volumeClaimTemplate": M{"spec": M{"accessModes": L{"ReadWriteOnce"},
		"resources":  M{"requests": M{"storage": "1Gi"}},
		"dataSource": M{"kind": "PersistentVolumeClaim", "name": "a"}, "dataSourceRef": M{"kind": "PersistentVolumeClaim", "name": "b"}}}}})
	vol("projected-trust-bundle-name", M{"projected": M{"sources": L{M{"clusterTrustBundle": M{"name": "bundle", "path": "ca.pem", "optional": true}}}}})
	vol("projected-trust-bundle-both", M{"projected": M{"sources": L{M{"clusterTrustBundle": M{"name": "bundle",
		"signerName": "example.com/signer", "path": "ca.pem"}}}}})
	vol("projected-trust-bundle-selector", M{"projected": M{"sources": L{M{"clusterTrustBundle": M{"signerName": "example.com/signer",
		"labelSelector": M{"matchLabels": M{"bundle": "a"}}, "path": "ca.pem"}}}}})
	vol("projected-pod-cert-all", M{"projected": M{"sources": L{M{"podCertificate": M{"signerName": "example.com/signer",
		"keyType": "ECDSAP256", "keyPath": "key.pem", "certificateChainPath": "chain.pem", "maxExpirationSeconds": 86400}}}}})
	vol("projected-pod-cert-no-path", M{"projected": M{"sources": L{M{"podCertificate": M{"signerName": "example.com/signer", "keyType": "ED25519"}}}}})
	vol("projected-optional", M{"projected": M{"sources": L{
		M{"configMap": M{"name": "c", "optional": true}}, M{"secret": M{"name": "s", "optional": true}}}}})
	vol("secret-optional", M{"secret": M{"secretName": "s", "optional": true}})

	c := "spec.containers[0]"
	b.mut("field/env-optional", "full", set(c+".envFrom[0].configMapRef.optional", true),
		set(c+".env[6].valueFrom.configMapKeyRef.optional", true))
	b.mut("field/env-file-key-ref-all", "minimal", set("spec.volumes", L{M{"name": "env", "emptyDir": M{}}}),
		set(c+".env", L{M{"name": "FROM_FILE", "valueFrom": M{"fileKeyRef": M{"volumeName": "env", "path": "vars.env", "key": "FROM_FILE", "optional": true}}}}))
	b.mut("field/claims-request", "minimal", set("spec.resourceClaims", L{M{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}}),
		set(c+".resources.claims", L{M{"name": "gpu", "request": "one"}}))
	b.mut("field/pod-resources-claims", "minimal", set("spec.resourceClaims", L{M{"name": "gpu", "resourceClaimName": "my-gpu"}}),
		set("spec.resources", M{"claims": L{M{"name": "gpu", "request": "one"}}}))
	b.mut("field/selinux-all", "full", set(c+".securityContext.seLinuxOptions", M{"user": "system_u", "role": "system_r", "type": "spc_t", "level": "s0"}))
	b.mut("field/gmsa-spec", "minimal", set("spec.securityContext.windowsOptions", M{"gmsaCredentialSpec": "{}", "gmsaCredentialSpecName": "spec"}))
	b.mut("field/gmsa-spec-empty", "minimal", set("spec.securityContext.windowsOptions", M{"gmsaCredentialSpec": ""}))
	b.mut("field/ephemeral-all", "minimal", set("spec.ephemeralContainers", L{M{
		"name": "debug", "image": "podrun/busybox:test", "targetContainerName": "app",
		"command": L{"sh"}, "args": L{"-c", "sleep 1"}, "stdin": true, "tty": true,
	}}))
	b.mut("field/managed-fields-ok", "minimal", set("metadata.managedFields", L{M{
		"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z",
		"fieldsType": "FieldsV1", "fieldsV1": M{"f:metadata": M{"f:labels": M{}}}, "subresource": "",
	}}))
	b.mut("field/deletion-grace", "minimal", set("metadata.deletionGracePeriodSeconds", 30))
	b.mut("field/owner-block-deletion", "minimal", set("metadata.ownerReferences", L{M{"apiVersion": "v1", "kind": "Node",
		"name": nodeName, "uid": "0d3b9c6e-0b7f-4d0e-9a59-0f5f1b4f0a11", "blockOwnerDeletion": true, "controller": true}}))
	b.mut("field/pod-affinity-required", "sched", set("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution", L{M{
		"labelSelector": M{"matchLabels": M{"app": "cache"}}, "topologyKey": "kubernetes.io/hostname",
		"namespaceSelector": M{"matchExpressions": L{M{"key": "team", "operator": "In", "values": L{"a"}}}}}}))
	b.mut("field/anti-affinity-preferred", "sched", set("spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution", L{M{
		"weight": 20, "podAffinityTerm": M{"labelSelector": M{"matchLabels": M{"app": "sched"}}, "topologyKey": "kubernetes.io/hostname"}}}))
	b.mut("field/node-aff-pref-fields", "sched", set(
		"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields",
		L{M{"key": "metadata.name", "operator": "NotIn", "values": L{"node2"}}}))

	// Fields added since Kubernetes v1.34.
	b.mut("new/bind-mount-options", "full", set(c+".volumeMounts[0].bindMountOptions", L{"nodev"}))
	b.mut("new/cm-default-user", "full", set("spec.volumes[3].configMap.defaultUser", 1000))
	b.mut("new/secret-default-user", "full", set("spec.volumes[4].secret.defaultUser", 1000))
	b.mut("new/dw-default-user", "full", set("spec.volumes[5].downwardAPI.defaultUser", 1000))
	b.mut("new/projected-default-user", "full", set("spec.volumes[6].projected.defaultUser", 1000))
	b.mut("new/key-to-path-user", "full", set("spec.volumes[3].configMap.items[0].user", 1000))
	b.mut("new/dw-file-user", "full", set("spec.volumes[5].downwardAPI.items[0].user", 1000))
	b.mut("new/sa-token-user", "full", set("spec.volumes[6].projected.sources[3]", M{"serviceAccountToken": M{"path": "token", "user": 1000}}))
	b.mut("new/trust-bundle-user", "full", set("spec.volumes[6].projected.sources[3]", M{"clusterTrustBundle": M{
		"signerName": "example.com/signer", "path": "ca.pem", "user": 1000}}))
	b.mut("new/pod-cert-user", "full", set("spec.volumes[6].projected.sources[3]", M{"podCertificate": M{
		"signerName": "example.com/signer", "keyType": "ED25519", "credentialBundlePath": "cred.pem", "user": 1000,
		"userAnnotations": M{"example.com/a": "b"}}}))
	b.mut("new/empty-dir-mode", "full", set("spec.volumes[0].emptyDir.mode", 0o700))
	b.mut("new/grpc-mode", "full", set(c+".startupProbe.grpc.mode", "Serving"))
	b.mut("new/http-get-protocol", "full", set(c+".livenessProbe.httpGet.protocol", "HTTP2"))
	b.mut("new/scheduling-group", "minimal", set("spec.schedulingGroup", M{"podGroupName": "group"}))
	b.mut("new/eviction-responders", "minimal", set("spec.evictionResponders", L{M{"name": "example.com/drain", "priority": 10}}))
}
