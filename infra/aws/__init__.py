"""AWS-facing helpers that are not Pulumi programs: the leftover sweep, doctor, preflight checks,
catalog refresh from the EC2 and Pricing APIs, and ECR image delivery."""
