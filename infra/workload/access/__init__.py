"""What a workload's pods may reach in the platform's cache bucket: the prefixes each kind of pod may
read and write (:mod:`.bucket_grants`, pure) and the Pod Identity role that grants them
(:mod:`.cache_access`)."""
